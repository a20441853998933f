import { describe, expect, it } from 'vitest';
import {
  datasetInSpec,
  datasetNameFromFile,
  isParquet,
  formatBytes,
  rowProblems,
  selectionAfterDelete,
  shortSha,
  withDataset,
} from './dataset';

describe('datasetNameFromFile', () => {
  it('drops the extension and folders, and replaces what a name cannot hold', () => {
    expect(datasetNameFromFile('gsm8k-mini.jsonl')).toBe('gsm8k-mini');
    expect(datasetNameFromFile('C:\\data\\my set.JSONL')).toBe('my-set');
    expect(datasetNameFromFile('../../etc/passwd')).toBe('passwd');
    expect(datasetNameFromFile('..a..b.jsonl')).toBe('a.b');
    expect(datasetNameFromFile('...')).toBe('dataset');
    expect(datasetNameFromFile('gsm8k train.parquet')).toBe('gsm8k-train');
  });
});

describe('rowProblems', () => {
  it('reads the line from rows[<line>] and keeps other details unnumbered', () => {
    expect(
      rowProblems([
        { field: 'rows[3]', message: 'line 3: missing field "answer"' },
        { field: 'rows', message: 'and 2 more bad lines' },
      ]),
    ).toEqual([
      { line: 3, message: 'line 3: missing field "answer"' },
      { line: null, message: 'and 2 more bad lines' },
    ]);
  });
});

describe('withDataset', () => {
  it('sets data.train_files and data.grader, keeping the rest of the spec', () => {
    const edit = withDataset('{"model": "m", "data": {"train_batch_size": 8}}', 'math', 'exact_match');
    expect(edit.ok).toBe(true);
    if (edit.ok) {
      expect(JSON.parse(edit.text)).toEqual({
        model: 'm',
        data: { train_batch_size: 8, train_files: 'dataset:math', grader: 'exact_match' },
      });
      expect(datasetInSpec(edit.text)).toBe('math');
    }
  });

  it('adds a data section when there is none, and refuses a spec that is not an object', () => {
    const edit = withDataset('{}', 'x', 'numeric');
    expect(edit.ok && JSON.parse(edit.text)).toEqual({ data: { train_files: 'dataset:x', grader: 'numeric' } });
    expect(withDataset('[1]', 'x', 'numeric').ok).toBe(false);
    const bad = withDataset('{oops', 'x', 'numeric');
    expect(bad.ok).toBe(false);
    if (!bad.ok) expect(bad.error).toMatch(/not valid JSON/);
  });
});

describe('datasetInSpec', () => {
  it('is null for no dataset, a path, or bad JSON', () => {
    expect(datasetInSpec('{"data": {}}')).toBeNull();
    expect(datasetInSpec('{"data": {"train_files": "/tmp/x.jsonl"}}')).toBeNull();
    expect(datasetInSpec('{')).toBeNull();
  });
});

describe('formatBytes', () => {
  it('uses binary units', () => {
    expect(formatBytes(512)).toBe('512 B');
    expect(formatBytes(2048)).toBe('2.0 KiB');
    expect(formatBytes(3 * 1024 * 1024)).toBe('3.0 MiB');
  });
});

describe('selectionAfterDelete', () => {
  it('moves to the next dataset, or the previous one at the end, or none', () => {
    expect(selectionAfterDelete(['a', 'b', 'c'], 'b')).toBe('c');
    expect(selectionAfterDelete(['a', 'b', 'c'], 'c')).toBe('b');
    expect(selectionAfterDelete(['a', 'b', 'c'], 'a')).toBe('b');
    expect(selectionAfterDelete(['a'], 'a')).toBe('');
    expect(selectionAfterDelete(['a', 'b'], 'gone')).toBe('a');
  });

  it('shortens a checksum', () => {
    expect(shortSha('0123456789abcdef0123')).toBe('0123456789ab…');
    expect(shortSha('abc')).toBe('abc');
  });
});

describe('isParquet', () => {
  it('sends Parquet files as they are and everything else as text', () => {
    expect(isParquet('train.parquet')).toBe(true);
    expect(isParquet('TRAIN.PARQUET')).toBe(true);
    expect(isParquet('train.jsonl')).toBe(false);
    expect(isParquet('parquet.jsonl')).toBe(false);
  });
});
