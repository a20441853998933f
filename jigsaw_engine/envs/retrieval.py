"""Retrieval-augmented QA where the model calls a real BM25 retriever as a tool.

The questions are about an invented world, so the answers cannot come from pre-training: the
model has to search (``<search>query</search>``), read the passages the env returns as a ``tool``
turn, then answer ``#### answer``. The retriever is a real in-memory BM25 index (``bm25s``), and
the time each call takes is reported in :attr:`Turn.tool_s`, so tool waits show up in rollouts.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from jigsaw_engine.envs.dataset_error import DatasetError
from jigsaw_engine.envs.graders import ANSWER_MARK, grade_exact_match
from jigsaw_engine.envs.jsonl_rows import read_jsonl_rows
from jigsaw_engine.envs.protocol import Environment, EnvTask, Episode, Turn
from jigsaw_engine.envs.turns import TurnCounter

DATA_DIR = Path(__file__).parent / "data"
RETRIEVAL_CORPUS = DATA_DIR / "retrieval_corpus.jsonl"
RETRIEVAL_QA = DATA_DIR / "retrieval_qa.jsonl"

PROMPT_SUFFIX = "Search with <search>query</search>, then answer with #### answer."
"""Ends every question: the two reply forms the env understands."""

NO_RESULTS = "No passages found."

_SEARCH = re.compile(r"<search>(.*?)</search>", re.DOTALL)
_STOPWORDS = "en"


@dataclass(frozen=True, slots=True)
class Passage:
    doc_id: str
    text: str


@dataclass(frozen=True, slots=True)
class SearchHit:
    passage: Passage
    score: float


@dataclass(frozen=True, slots=True)
class RetrievalQuestion:
    """One QA row: the question, its answer, and the passage that holds the answer."""

    question_id: str
    """``<file stem>:<line>``: stable while the file is."""
    question: str
    answer: str
    doc_id: str
    source: str
    """``path:line`` of the row."""


def load_corpus(path: Path | str = RETRIEVAL_CORPUS) -> list[Passage]:
    """Passages ``{"id", "text"}``, one per line; ids must be unique."""
    rows = read_jsonl_rows(path, ("id", "text"), hint='each line needs {"id": ..., "text": ...}')
    first_line: dict[str, int] = {}
    duplicates: list[str] = []
    for row in rows:
        doc_id = row.fields["id"]
        if doc_id in first_line:
            duplicates.append(f'{path}:{row.line}: id "{doc_id}" already used on line {first_line[doc_id]}')
        first_line.setdefault(doc_id, row.line)
    if duplicates:
        raise DatasetError(str(path), duplicates, hint="passage ids must be unique")
    return [Passage(doc_id=row.fields["id"], text=row.fields["text"]) for row in rows]


def load_retrieval_qa(path: Path | str = RETRIEVAL_QA) -> list[RetrievalQuestion]:
    """QA rows ``{"question", "answer", "doc_id"}``, one per line."""
    rows = read_jsonl_rows(
        path, ("question", "answer", "doc_id"), hint='each line needs {"question": ..., "answer": ..., "doc_id": ...}'
    )
    stem = Path(path).stem
    return [
        RetrievalQuestion(
            question_id=f"{stem}:{row.line}",
            question=row.fields["question"].strip(),
            answer=row.fields["answer"].strip(),
            doc_id=row.fields["doc_id"],
            source=f"{path}:{row.line}",
        )
        for row in rows
    ]


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """Lower-cased words of two or more characters, English stopwords dropped; no stemming."""
    import bm25s

    tokens: list[list[str]] = bm25s.tokenize(
        list(texts), lower=True, stopwords=_STOPWORDS, return_ids=False, show_progress=False
    )
    return tokens


class Bm25Retriever:
    """An in-memory BM25 index over ``passages``, built once; searches are read-only."""

    def __init__(self, passages: Sequence[Passage]) -> None:
        import bm25s

        if not passages:
            raise ValueError("a retriever needs at least one passage")
        self.passages = tuple(passages)
        self._index = bm25s.BM25()
        self._index.index(tokenize([p.text for p in self.passages]), show_progress=False)

    def search(self, query: str, k: int = 3) -> list[SearchHit]:
        """The best ``k`` passages for ``query``, best first; passages sharing no word with it are left out."""
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        tokens = tokenize([query])
        if not tokens[0]:
            return []
        k = min(k, len(self.passages))
        docs, scores = self._index.retrieve(tokens, k=k, show_progress=False)
        return [
            SearchHit(passage=self.passages[int(doc)], score=float(score))
            for doc, score in zip(docs[0], scores[0], strict=True)
            if score > 0
        ]


def render_hits(hits: Sequence[SearchHit]) -> str:
    """The tool message the model reads: one ``[id] text`` line per passage."""
    if not hits:
        return NO_RESULTS
    return "\n".join(f"[{hit.passage.doc_id}] {hit.passage.text}" for hit in hits)


class RetrievalEpisode(TurnCounter):
    """Searches until the model answers, stops, or runs out of turns."""

    def __init__(self, task: EnvTask, retriever: Bm25Retriever, *, k: int, max_turns: int) -> None:
        super().__init__(task, max_turns=max_turns)
        self._retriever = retriever
        self._k = k

    def respond(self, reply: str) -> Turn:
        self._next_turn()
        if ANSWER_MARK in reply:
            return self._finish(grade_exact_match(reply, self._task.answer))
        search = _SEARCH.search(reply)
        if search is None or self._last_turn:
            return self._finish(0.0)
        started = time.perf_counter()
        hits = self._retriever.search(search.group(1).strip(), self._k)
        elapsed = time.perf_counter() - started
        return Turn(done=False, observation=render_hits(hits), role="tool", tool_s=elapsed)


class RetrievalEnv(Environment):
    """QA over a shipped (or given) corpus; the answer is graded by exact match, the retriever is a tool."""

    def __init__(
        self,
        questions: Sequence[RetrievalQuestion],
        passages: Sequence[Passage],
        *,
        k: int = 3,
        max_turns: int = 3,
        name: str = "retrieval",
    ) -> None:
        if not questions:
            raise ValueError(f"environment {name!r} has no questions")
        if k < 1:
            raise ValueError(f"k must be at least 1, got {k}")
        if max_turns < 1:
            raise ValueError(f"max_turns must be at least 1, got {max_turns}")
        known = {p.doc_id for p in passages}
        orphans = [f"{q.source} ({q.doc_id})" for q in questions if q.doc_id not in known]
        if orphans:
            raise ValueError(f"questions name passages the corpus lacks: {', '.join(orphans[:5])}")
        self.name = name
        self.max_turns = max_turns
        self.k = k
        self.retriever = Bm25Retriever(passages)
        self._tasks = tuple(
            EnvTask(task_id=q.question_id, prompt=f"{q.question}\n{PROMPT_SUFFIX}", answer=q.answer, source=q.source)
            for q in questions
        )

    def dataset(self) -> Sequence[EnvTask]:
        return self._tasks

    def episode(self, task: EnvTask) -> Episode:
        return RetrievalEpisode(task, self.retriever, k=self.k, max_turns=self.max_turns)


def make_retrieval_env(
    corpus_path: Path | str = RETRIEVAL_CORPUS, qa_path: Path | str = RETRIEVAL_QA, *, k: int = 3, max_turns: int = 3
) -> RetrievalEnv:
    """The retrieval environment over the shipped corpus and questions, or over given files."""
    return RetrievalEnv(load_retrieval_qa(qa_path), load_corpus(corpus_path), k=k, max_turns=max_turns)
