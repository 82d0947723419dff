#!/usr/bin/env bash
# One session on a lent GPU (issue 41's checks), everything written under $OUT:
# env.txt (card, driver, torch, CUDA), pytest.log (`pytest -m gpu`), bench.log (the
# paper-scale rows of `lg-study bench --only gpu`, one study at a time, each bounded),
# gpu_rates.json (the rates they record), probe.json (tools/gpu_probe.py).
# Needs .dev/site.tar.xz (the packages the GPU machine lacks: wheel_bundle.sh), carried.
# Knobs: PYTEST_S, STUDY_S (seconds per phase), STUDIES, PROBES, BENCH_STEPS.
set -u
OUT=${OUT:-/tmp/gpu_out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=/tmp/site:$PWD
[ -d /tmp/site/ray ] || { mkdir -p /tmp/site && tar -xJf .dev/site.tar.xz -C /tmp/site; } || exit 1
{ date -u; nvidia-smi; python3 -c "import torch, ray, mlflow, duckdb; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(), 'ray', ray.__version__, 'mlflow', mlflow.__version__, 'duckdb', duckdb.__version__)"; git log -1 --format=%H 2>/dev/null; } > "$OUT/env.txt" 2>&1
tail -3 "$OUT/env.txt"
if [ "${PYTEST_S:-150}" -gt 0 ]; then
  started=$(date +%s)
  timeout "${PYTEST_S:-150}" python3 -m pytest -m gpu -n 8 -q -rs -p no:cacheprovider ${PYTEST_ARGS:-} > "$OUT/pytest.log" 2>&1
  echo "pytest rc $? in $(( $(date +%s) - started )) s"; grep -E "FAILED|ERROR|Timeout|[0-9]+ (passed|failed)" "$OUT/pytest.log" | tail -40
fi
for study in ${STUDIES-seed_robustness sota_coupling cascade_distribution model_size sota_abacus}; do
  timeout "${STUDY_S:-60}" python3 -c "
import sys
from orchestrator.benchmarks.bench_gpu_studies import paper_scale
steps, warmup, runs = (int(x) for x in '${BENCH_STEPS:-10 3 2}'.split())
for row in paper_scale(studies=('$study',), steps=steps, warmup=warmup, runs=runs):
    print(f'{row.name} | {row.ratio} | {row.detail}', flush=True)
" >> "$OUT/bench.log" 2>&1 || echo "$study: rc $? (timeout 124)" >> "$OUT/bench.log"
done
[ -f "$OUT/bench.log" ] && grep -v Warning "$OUT/bench.log" | tail -25
cp results/gpu_rates.json "$OUT/" 2>/dev/null
[ -n "${PROBES-x}" ] && timeout "${PROBE_S:-120}" python3 tools/gpu_probe.py "$OUT" ${PROBES:-} > "$OUT/probe.log" 2>&1; echo "probe rc $?"
python3 -c "
import json; d = json.load(open('$OUT/probe.json'))
for k, v in d.items(): print(k, json.dumps(v)[:1500])" 2>&1 | tail -40
