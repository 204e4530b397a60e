"""Traces from the CLI as a user turns them on: `iterion run` with OTEL_EXPORTER_OTLP_ENDPOINT
pointing at a collector on 127.0.0.1 (a real HTTP server decoding the OTLP protobuf) exports the
run's spans before the process exits; without opentelemetry installed, one warning and a normal run."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.conftest import REPO_ROOT, run_cli


class Collector(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.requests: list[tuple[str, ExportTraceServiceRequest]] = []


class _Handler(BaseHTTPRequestHandler):
    server: Collector

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        req = ExportTraceServiceRequest()
        req.ParseFromString(body)
        self.server.requests.append((self.path, req))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[Collector]:
    c = Collector()
    threading.Thread(target=c.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()  # a quick shutdown()
    yield c
    c.shutdown()
    c.server_close()


def test_iterion_run_exports_its_trace_over_otlp(tmp_path: Path, collector: Collector) -> None:
    work = tmp_path / "demo"
    shutil.copytree(REPO_ROOT / "fixtures" / "demo", work)
    endpoint = f"http://127.0.0.1:{collector.server_address[1]}"
    proc = run_cli("run", "demo.bot", "--json", cwd=work, store=tmp_path / "store",
                   env={"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "ITERION_OTEL": None, "OTEL_SERVICE_NAME": None})
    assert proc.returncode == 4, proc.stderr  # parked at the gate
    assert collector.requests, "no spans were exported before the process exited"
    assert {path for path, _ in collector.requests} == {"/v1/traces"}
    spans, services = [], set()
    for _, req in collector.requests:
        for rs in req.resource_spans:
            services |= {a.value.string_value for a in rs.resource.attributes if a.key == "service.name"}
            for ss in rs.scope_spans:
                spans += list(ss.spans)
    assert services == {"iterion"}
    run_id = json.loads(proc.stdout)["run_id"]
    assert {s.trace_id.hex() for s in spans} == {run_id}
    names = {s.name for s in spans}
    assert "iterion.run demo" in names and "iterion.node gather" in names and "chat demo-writer" in names
    chat = next(s for s in spans if s.name == "chat demo-writer")
    attrs = {a.key: a.value for a in chat.attributes}
    assert attrs["gen_ai.system"].string_value == "script" and attrs["gen_ai.usage.input_tokens"].int_value > 0


def test_on_without_opentelemetry_warns_once_and_runs(tmp_path: Path) -> None:
    work = tmp_path / "demo"
    shutil.copytree(REPO_ROOT / "fixtures" / "demo", work)
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    # a sitecustomize that makes `import opentelemetry` fail, as on an install without the extra
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['opentelemetry'] = None\n")
    proc = run_cli("run", "demo.bot", "--json", cwd=work, store=tmp_path / "store",
                   env={"ITERION_OTEL": "1", "PYTHONPATH": f"{blocker}:{REPO_ROOT}"})
    assert proc.returncode == 4, proc.stderr
    warnings = [ln for ln in proc.stderr.splitlines() if "opentelemetry is missing" in ln]
    assert len(warnings) == 1 and "pip install 'iterion[otel]'" in warnings[0]
