"""doc/aws.md's examples stay well-formed: the MPIJob YAML parses and asks
for GPUs, EFA devices, huge pages and memory; the Dockerfile's instructions
are known, continuations closed, FROM first after ARGs, ENV names valid, and
every RUN body passes sh -n; and the Dockerfile the page shows is
doc/Dockerfile itself, byte for byte. (Nothing is applied or built: no
cluster, no Docker daemon in CI.) Usage: aws_examples.py doc/aws.md"""
import os
import re
import subprocess
import sys

try:
    import yaml
except ImportError:
    print("SKIP: python3 yaml module missing")
    sys.exit(77)
text = open(sys.argv[1]).read()
blocks = re.findall(r"```(yaml|dockerfile)\n(.*?)```", text, re.S)
kinds = [k for k, _ in blocks]
assert kinds.count("yaml") == 1 and kinds.count("dockerfile") == 1, kinds
for kind, body in blocks:
    if kind == "yaml":
        doc = yaml.safe_load(body)
        assert doc["kind"] == "MPIJob" and doc["apiVersion"] == "kubeflow.org/v2beta1"
        w = doc["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"]
        for part in ("requests", "limits"):
            for res in ("nvidia.com/gpu", "vpc.amazonaws.com/efa", "hugepages-2Mi", "memory"):
                assert res in w[part], (part, res)
        cmd = doc["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"]
        assert all(isinstance(c, str) for c in cmd), "every mpirun argument must be a string"
        assert "NCCL_NET=SRD" in cmd
        print("yaml: ok,", len(cmd), "launcher arguments; worker requests", w["requests"])
    else:
        path = os.path.join(os.path.dirname(sys.argv[1]), "Dockerfile")
        assert body == open(path).read(), "the Dockerfile in " + sys.argv[1] + " is not " + path
        known = {"FROM", "RUN", "CMD", "LABEL", "EXPOSE", "ENV", "ADD", "COPY", "ENTRYPOINT", "VOLUME", "USER",
                 "WORKDIR", "ARG", "ONBUILD", "STOPSIGNAL", "HEALTHCHECK", "SHELL"}
        lines, cur = [], ""
        for raw in body.splitlines():
            if not cur and (not raw.strip() or raw.lstrip().startswith("#")):
                continue
            if cur and raw.lstrip().startswith("#"):
                continue  # comment lines inside a continuation are dropped by the parser
            cur += raw.rstrip()
            if cur.endswith("\\"):
                cur = cur[:-1] + " "
                continue
            lines.append(cur)
            cur = ""
        assert not cur, "unterminated continuation"
        seen_from = False
        for l in lines:
            instr = l.split(None, 1)[0]
            assert instr.upper() == instr and instr in known, "unknown instruction " + instr
            if instr == "FROM":
                seen_from = True
            else:
                assert seen_from or instr == "ARG", instr + " before FROM"
            if instr == "ENV":
                args = l.split(None, 1)[1]
                for kv in re.findall(r"(\S+?)=(\S+)", args):
                    assert re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", kv[0]), kv
            if instr == "RUN":
                r = subprocess.run(["sh", "-n", "-c", l[4:]], capture_output=True, text=True)
                assert r.returncode == 0, "RUN is not valid sh: " + r.stderr + l[:60]
        print("dockerfile: ok,", len(lines), "instructions:", " ".join(l.split()[0] for l in lines))
