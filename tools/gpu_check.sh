#!/usr/bin/env bash
# One session on a lent GPU (issue 52's checks), everything written under $OUT:
# env.txt (card, driver, torch, CUDA), then the PHASES in order, each bounded by its own
# limit and by DEADLINE_S for the whole session (a phase with too little time left is
# skipped and says so):
#   pytest  `pytest -m gpu` (needs ray, mlflow, duckdb: the full bundle)  -> pytest.log
#   probe:S tools/gpu_probe.py section S (syncs, profile, seeds, flex)    -> probe_S.json
#   rates   every trial shape of RATE_STUDIES in its study's own mode     -> rates.log
#   studies the paper-scale rows of STUDIES in the four modes              -> bench.log
#   small   the small-trial rows of `lg-study bench --only gpu` and `--only seeds` (needs ray) -> bench.log
# and results/gpu_rates.json (the rates recorded) copied to $OUT after every phase.
# Needs the packages the GPU machine lacks, carried as .dev/*.tar.xz (wheel_bundle.sh;
# the rates, studies and probe phases need only pydantic, pyyaml and optuna's import).
set -u
OUT=${OUT:-/tmp/gpu_out}; mkdir -p "$OUT"
SITE=${SITE:-/tmp/site}; export PYTHONUNBUFFERED=1 PYTHONPATH=$SITE:$PWD
started=$(date +%s); deadline=$((started + ${DEADLINE_S:-480}))
if [ ! -d "$SITE/pydantic" ]; then
  mkdir -p "$SITE" && for bundle in .dev/*.tar.xz; do tar -xJf "$bundle" -C "$SITE" || exit 1; done
fi
{ date -u; nvidia-smi; python3 -c "import torch, pydantic; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(), 'pydantic', pydantic.__version__)"; git log -1 --format=%H 2>/dev/null; } > "$OUT/env.txt" 2>&1
tail -3 "$OUT/env.txt"

# bounded LIMIT LABEL CMD...: CMD for at most min(LIMIT, the time left to the deadline)
bounded() {
  local limit=$1 label=$2; shift 2; local left=$((deadline - $(date +%s)))
  [ "$left" -lt 20 ] && { echo "$label: skipped, $left s left"; return 0; }
  [ "$limit" -gt "$left" ] && limit=$left
  local t0; t0=$(date +%s); timeout "$limit" "$@"; local rc=$?
  echo "$label: rc $rc in $(( $(date +%s) - t0 )) s"
  cp results/gpu_rates.json "$OUT/" 2>/dev/null; return 0
}

for phase in ${PHASES-probe:noise small probe:syncs studies probe:seeds probe:profile rates pytest}; do
  case $phase in
    pytest) bounded "${PYTEST_S:-150}" pytest python3 -m pytest -m gpu -n 8 -q -rs -p no:cacheprovider ${PYTEST_ARGS:-} > "$OUT/pytest.log" 2>&1
            grep -E "FAILED|ERROR|[0-9]+ (passed|failed)" "$OUT/pytest.log" | tail -20 ;;
    probe:*) section=${phase#probe:}  # the run's files come back only when few: one probe.log, one json a section
             bounded "${PROBE_S:-90}" "$phase" python3 tools/gpu_probe.py "/tmp/probe_$section" "$section" > "/tmp/probe_$section.log" 2>&1
             cp "/tmp/probe_$section/probe.json" "$OUT/probe_$section.json" 2>/dev/null
             grep -v Warning "/tmp/probe_$section.log" | tee -a "$OUT/probe.log" | cut -c1-300 | head -40 ;;
    small) bounded "${SMALL_S:-180}" small python3 -c "
from orchestrator.benchmarks.bench_gpu import gpu
from orchestrator.benchmarks.bench_seed_batch import seed_batch_rows
for row in [*gpu(), *seed_batch_rows(cpu_steps=2)]:
    print(f'{row.name} | {row.ratio} | {row.detail}', flush=True)" >> "$OUT/bench.log" 2>&1
           grep -v Warning "$OUT/bench.log" | tail -14 ;;
    rates) for study in ${RATE_STUDIES-seed_robustness sota_coupling sota_comparison pe_comparison cascade_distribution model_size format_ablation}; do
             bounded "${RATE_S:-90}" "rates $study" python3 -c "
from orchestrator.benchmarks.bench_gpu_studies import own_mode_rows
own_mode_rows('$study', steps=${RATE_STEPS:-5}, warmup=2)" >> "$OUT/rates.log" 2>&1
           done
           grep -v Warning "$OUT/rates.log" | cut -c1-220 | tail -40 ;;
    studies) for study in ${STUDIES-sota_abacus}; do
               bounded "${STUDY_S:-180}" "studies $study" python3 -c "
from orchestrator.benchmarks.bench_gpu_studies import paper_scale
steps, warmup, runs = (int(x) for x in '${BENCH_STEPS:-10 3 2}'.split())
for row in paper_scale(studies=('$study',), steps=steps, warmup=warmup, runs=runs):
    print(f'{row.name} | {row.ratio} | {row.detail}', flush=True)" >> "$OUT/bench.log" 2>&1
             done
             grep -v Warning "$OUT/bench.log" | tail -12 ;;
  esac
done
echo "session: $(( $(date +%s) - started )) s"
