"""Validate docker/kuberay/raycluster.yaml without a Kubernetes cluster (docker/check.sh runs it).

    python docker/kuberay/check_raycluster.py [MANIFEST]

Checks what the deployment relies on: the head's GCS (6390) and Ray Client (10001) ports sit on
a ClusterIP Service only (no NodePort, LoadBalancer, Ingress, host port or host network) and
its dashboard is off; every worker group asks for GPUs (``nvidia.com/gpu`` limit, matching
``num-gpus``) and targets GPU nodes (node selector or affinity, and a toleration); token
authentication is on; the images are the ones docker/compose.yaml builds and ``rayVersion``
is the ray pinned in constraints.txt; a NetworkPolicy admits only Ray pods and Ray Client.

Exit status: 0 valid, 1 invalid (each problem on stderr), 2 unreadable input.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
DOCKER_DIR = HERE.parent
GCS_PORT = 6390
CLIENT_PORT = 10001
FORBIDDEN_PORTS = {6379: "Redis's port", 8265: "the Ray dashboard"}
GPU_RESOURCE = "nvidia.com/gpu"
EXPOSED_SERVICE_TYPES = {"NodePort", "LoadBalancer"}


def image_basename(image: str) -> str:
    """``registry.example.com/team/jigsawrl:1.2`` -> ``jigsawrl:1.2`` (registries differ per site)."""
    return image.rsplit("/", 1)[-1]


def compose_images(docker_dir: Path) -> dict[str, str]:
    """The images compose uses: JIGSAW_IMAGE and JIGSAW_GPU_IMAGE in .env.example, else compose's defaults."""
    env_example = (docker_dir / ".env.example").read_text()
    compose = (docker_dir / "compose.yaml").read_text()
    images = {}
    for var in ("JIGSAW_IMAGE", "JIGSAW_GPU_IMAGE"):
        documented = re.search(rf"^{var}=(\S+)", env_example, re.M)
        default = re.search(rf"\$\{{{var}:-([^}}]+)\}}", compose)
        if documented:
            images[var] = documented.group(1)
        elif default:
            images[var] = default.group(1)
    return images


def pinned_ray_version(constraints: Path) -> str | None:
    found = re.search(r"^ray==(\S+)", constraints.read_text(), re.M | re.I) if constraints.exists() else None
    return found.group(1) if found else None


def _containers(template: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(((template or {}).get("spec") or {}).get("containers") or [])


def _ray_container(template: Mapping[str, Any]) -> dict[str, Any]:
    containers = _containers(template)
    return containers[0] if containers else {}


def _ports(container: Mapping[str, Any]) -> list[dict[str, Any]]:
    return list(container.get("ports") or [])


def _as_int(value: Any) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


class Checker:
    def __init__(self, documents: Iterable[Any], images: Mapping[str, str], ray_version: str | None) -> None:
        self.documents = [d for d in documents if d]
        self.images = images
        self.ray_version = ray_version
        self.problems: list[str] = []

    def need(self, condition: Any, message: str) -> None:
        if not condition:
            self.problems.append(message)

    def run(self) -> list[str]:
        clusters = [d for d in self.documents if d.get("kind") == "RayCluster"]
        self.need(len(clusters) == 1, f"expected exactly one RayCluster, found {len(clusters)}")
        self.check_no_exposure()
        if clusters:
            cluster = clusters[0]
            self.check_cluster(cluster)
            self.check_network_policy(str((cluster.get("metadata") or {}).get("name", "")))
        return self.problems

    def check_no_exposure(self) -> None:
        for doc in self.documents:
            kind, name = doc.get("kind"), (doc.get("metadata") or {}).get("name")
            self.need(
                kind not in ("Ingress", "Route", "Gateway"), f"{kind} {name}: Ray must not be reachable from outside"
            )
            if kind == "Service":
                service_type = (doc.get("spec") or {}).get("type", "ClusterIP")
                self.need(service_type not in EXPOSED_SERVICE_TYPES, f"Service {name}: type {service_type} exposes Ray")

    def check_cluster(self, cluster: Mapping[str, Any]) -> None:
        spec = cluster.get("spec") or {}
        self.need(
            cluster.get("apiVersion") == "ray.io/v1",
            f"RayCluster apiVersion must be ray.io/v1, got {cluster.get('apiVersion')}",
        )
        if self.ray_version:
            self.need(
                str(spec.get("rayVersion")) == self.ray_version,
                f"rayVersion {spec.get('rayVersion')!r} must equal ray=={self.ray_version} (constraints.txt)",
            )
        auth = spec.get("authOptions") or {}
        self.need(auth.get("mode") == "token", "authOptions.mode must be token (Ray token authentication)")
        self.need(
            auth.get("secretName"),
            "authOptions.secretName: name the Secret holding auth_token (shared with the control plane)",
        )
        self.check_head(spec.get("headGroupSpec") or {})
        groups = list(spec.get("workerGroupSpecs") or [])
        self.need(groups, "workerGroupSpecs: at least one GPU worker group")
        for group in groups:
            self.check_worker_group(group)
        products = " ".join(str(_node_target(g)) for g in groups).upper()
        for accelerator in ("H100", "A100"):
            self.need(accelerator in products, f"workerGroupSpecs: no group targets {accelerator} nodes")

    def check_head(self, head: Mapping[str, Any]) -> None:
        where = "headGroupSpec"
        self.need(
            head.get("serviceType", "ClusterIP") == "ClusterIP",
            f"{where}.serviceType must be ClusterIP, got {head.get('serviceType')}",
        )
        service_type = ((head.get("headService") or {}).get("spec") or {}).get("type", "ClusterIP")
        self.need(service_type == "ClusterIP", f"{where}.headService.spec.type must be ClusterIP, got {service_type}")
        self.need(not head.get("enableIngress"), f"{where}.enableIngress must be off")
        params = {str(k): str(v) for k, v in (head.get("rayStartParams") or {}).items()}
        self.need(
            params.get("port") == str(GCS_PORT), f'{where}.rayStartParams.port must be "{GCS_PORT}" (GCS; never 6379)'
        )
        self.need(
            params.get("ray-client-server-port") == str(CLIENT_PORT),
            f'{where}.rayStartParams.ray-client-server-port must be "{CLIENT_PORT}"',
        )
        self.need(
            params.get("include-dashboard", "").lower() == "false",
            f'{where}.rayStartParams.include-dashboard must be "false"',
        )
        self.need(
            params.get("dashboard-host") in ("127.0.0.1", "localhost"),
            f"{where}.rayStartParams.dashboard-host must be 127.0.0.1",
        )
        self.need(params.get("num-gpus") == "0", f'{where}.rayStartParams.num-gpus must be "0" (the head is CPU-only)')
        template = head.get("template") or {}
        self.check_pod(template, where)
        container = _ray_container(template)
        ports = {_as_int(p.get("containerPort")): p for p in _ports(container)}
        self.need(
            GCS_PORT in ports and CLIENT_PORT in ports,
            f"{where}: the head container must declare ports {GCS_PORT} and {CLIENT_PORT}",
        )
        self.need(
            (ports.get(GCS_PORT) or {}).get("name") == "gcs-server",
            f"{where}: port {GCS_PORT} must be named gcs-server (KubeRay reads the GCS port from it)",
        )
        limits = (container.get("resources") or {}).get("limits") or {}
        self.need(GPU_RESOURCE not in limits, f"{where}: the head must not ask for {GPU_RESOURCE}")
        self.check_image(container, "JIGSAW_IMAGE", where)

    def check_worker_group(self, group: Mapping[str, Any]) -> None:
        where = f"workerGroupSpecs[{group.get('groupName')}]"
        replicas = [_as_int(group.get(k, 0)) for k in ("minReplicas", "replicas", "maxReplicas")]
        self.need(
            all(r is not None for r in replicas) and replicas[0] <= replicas[1] <= replicas[2],  # type: ignore[operator]
            f"{where}: need minReplicas <= replicas <= maxReplicas, got {replicas}",
        )
        template = group.get("template") or {}
        self.check_pod(template, where)
        container = _ray_container(template)
        gpus = _as_int(((container.get("resources") or {}).get("limits") or {}).get(GPU_RESOURCE, 0))
        self.need(gpus and gpus > 0, f"{where}: the worker container needs a positive {GPU_RESOURCE} limit")
        params = {str(k): str(v) for k, v in (group.get("rayStartParams") or {}).items()}
        if "num-gpus" in params:
            self.need(
                _as_int(params["num-gpus"]) == gpus,
                f"{where}: rayStartParams.num-gpus {params['num-gpus']} != {GPU_RESOURCE} limit {gpus}",
            )
        pod = template.get("spec") or {}
        self.need(_node_target(group), f"{where}: needs a nodeSelector or node affinity for its GPU type")
        tolerated = {t.get("key") for t in pod.get("tolerations") or []}
        self.need(GPU_RESOURCE in tolerated, f"{where}: needs a toleration for the {GPU_RESOURCE} taint of GPU nodes")
        self.check_image(container, "JIGSAW_GPU_IMAGE", where)

    def check_pod(self, template: Mapping[str, Any], where: str) -> None:
        pod = template.get("spec") or {}
        self.need(not pod.get("hostNetwork"), f"{where}: hostNetwork would put Ray's ports on the node's interfaces")
        self.need(_containers(template), f"{where}: no containers")
        for container in _containers(template):
            for port in _ports(container):
                number = _as_int(port.get("containerPort"))
                self.need(
                    not port.get("hostPort"),
                    f"{where}: container {container.get('name')} publishes hostPort {port.get('hostPort')}",
                )
                if number in FORBIDDEN_PORTS:
                    self.need(False, f"{where}: port {number} ({FORBIDDEN_PORTS[number]}) must not be declared")

    def check_image(self, container: Mapping[str, Any], var: str, where: str) -> None:
        expected = self.images.get(var)
        image = str(container.get("image", ""))
        if expected:
            self.need(
                image_basename(image) == image_basename(expected),
                f"{where}: image {image!r} must be {expected!r} ({var} in docker/.env.example), any registry",
            )

    def check_network_policy(self, cluster_name: str) -> None:
        policies = [
            d
            for d in self.documents
            if d.get("kind") == "NetworkPolicy"
            and ((d.get("spec") or {}).get("podSelector") or {}).get("matchLabels", {}).get("ray.io/cluster")
            == cluster_name
        ]
        self.need(policies, f"a NetworkPolicy selecting ray.io/cluster={cluster_name} must restrict who reaches Ray")
        for policy in policies:
            name = (policy.get("metadata") or {}).get("name")
            for rule in (policy.get("spec") or {}).get("ingress") or []:
                peers = rule.get("from") or []
                self.need(peers, f"NetworkPolicy {name}: an ingress rule without `from` admits every pod")
                ray_only = all(
                    ((p.get("podSelector") or {}).get("matchLabels") or {}).get("ray.io/cluster") == cluster_name
                    for p in peers
                )
                if not ray_only:
                    ports = {_as_int(p.get("port")) for p in rule.get("ports") or []}
                    self.need(
                        ports == {CLIENT_PORT},
                        f"NetworkPolicy {name}: other pods may reach {CLIENT_PORT} only, got {sorted(ports, key=str)}",
                    )
                    self.need(
                        not any("ipBlock" in p for p in peers),
                        f"NetworkPolicy {name}: no ipBlock peers (they admit addresses outside the cluster)",
                    )


def _gpu_limit(group: Mapping[str, Any]) -> Any:
    return ((_ray_container(group.get("template") or {}).get("resources") or {}).get("limits") or {}).get(GPU_RESOURCE)


def _node_target(group: Mapping[str, Any]) -> Any:
    pod = (group.get("template") or {}).get("spec") or {}
    return pod.get("nodeSelector") or ((pod.get("affinity") or {}).get("nodeAffinity"))


def main(argv: list[str]) -> int:
    manifest = Path(argv[0]) if argv else HERE / "raycluster.yaml"
    try:
        documents = list(yaml.safe_load_all(manifest.read_text()))
    except (OSError, yaml.YAMLError) as exc:
        print(f"check_raycluster: {manifest}: {exc}", file=sys.stderr)
        return 2
    images = compose_images(DOCKER_DIR)
    checker = Checker(documents, images, pinned_ray_version(DOCKER_DIR.parent / "constraints.txt"))
    problems = checker.run()
    for problem in problems:
        print(f"check_raycluster: FAIL: {manifest.name}: {problem}", file=sys.stderr)
    if problems:
        return 1
    spec = next(d for d in checker.documents if d.get("kind") == "RayCluster")["spec"]
    groups = ", ".join(
        f"{g['groupName']} x{g.get('replicas', 0)} ({_gpu_limit(g)} GPUs each)" for g in spec["workerGroupSpecs"]
    )
    print(
        f"check_raycluster: OK ({manifest.name}: CPU head on ClusterIP {GCS_PORT}/{CLIENT_PORT}; GPU groups {groups})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
