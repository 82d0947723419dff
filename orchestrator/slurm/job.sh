# --- the fixed part of every script `lg-study slurm` writes --------------------------------
set -o pipefail
say() { echo "lg-study slurm [$(date -u +%FT%TZ)] $*"; }
say "job ${SLURM_JOB_ID} (run $((${SLURM_RESTART_COUNT:-0} + 1))) on ${SLURM_JOB_NUM_NODES} nodes: ${SLURM_JOB_NODELIST}"

# Stop signals. Slurm sends USR1 to this shell alone, --grace seconds before the time
# limit: it becomes one SIGTERM for `lg-study run`, which then stops as on Ctrl-C (trials
# stop at their next step, checkpoints and rows kept, exit 130). A requeue, a preemption
# or scancel sends SIGTERM to every process of the job, lg-study's and Ray's included, and
# SIGKILL after the site's KillWait: this shell only says what is kept (a second SIGTERM
# would make lg-study stop at once, not cleanly).
stopping=""
driver=""
on_warning() {
    stopping="the time limit is near"
    say "Slurm's warning: ${stopping}; stopping the study"
    if [[ -n "$driver" ]]; then kill -TERM "$driver" 2>/dev/null; fi
}
trap on_warning USR1
on_stop() {
    stopping="Slurm is stopping the job (a requeue, a preemption or scancel)"
    say "${stopping}: every process of the job was signalled, Ray's too, and what lg-study has not" \
        "ended when Slurm's KillWait is over is killed. Kept in $LG_RESULTS either way: every finished trial," \
        "and each unfinished trial's rows up to its last checkpoint, from which it continues when the job" \
        "runs again (a requeued job does by itself; otherwise 'sbatch $LG_SCRIPT')"
}
trap on_stop TERM INT

# 1. The site's set-up (modules, a conda or venv activation: --setup), then lg-study's own
#    environment: the bin folder of the lg-study that wrote this script.
if [[ -n "$LG_SETUP" ]]; then
    # shellcheck disable=SC1090
    source "$LG_SETUP" || { say "error: the set-up file $LG_SETUP failed"; exit 2; }
fi
export PATH="$LG_BIN:$PATH"

# 2. The results folder must be one folder that every node sees (trials write their rows
#    and checkpoints there from whichever node runs them): a marker file written here
#    must be visible on each node before Ray starts (looked for three times, a second
#    apart: a network filesystem may show a new file late). --overlap lets this step, and
#    Ray's below, share the CPUs the allocation already holds.
marker="$LG_RESULTS/.slurm-check-${SLURM_JOB_ID}-${SLURM_RESTART_COUNT:-0}"
if ! mkdir -p "$LG_RESULTS" || ! hostname > "$marker"; then
    say "error: cannot write to the results folder $LG_RESULTS on $(hostname)"
    exit 2
fi
if ! srun --overlap --nodes="$SLURM_JOB_NUM_NODES" --ntasks="$SLURM_JOB_NUM_NODES" --ntasks-per-node=1 \
        --kill-on-bad-exit=0 bash -c 'for _ in 1 2 3; do test -f "$1" && exit 0; sleep 1; done
            echo "lg-study slurm: error: node $SLURMD_NODENAME ($(hostname)) does not see $2" >&2; exit 1' \
        check "$marker" "$LG_RESULTS"; then
    rm -f "$marker"
    say "error: the results folder $LG_RESULTS is not on a filesystem every node sees (see above);" \
        "give lg-study slurm --results a folder on the cluster's shared filesystem"
    exit 2
fi
rm -f "$marker"

# 3. One Ray cluster over the allocation: the head on this node (the allocation's first),
#    one worker node on each other node, each with the CPUs and GPUs Slurm gave it.
#    Token authentication: a fresh token for each run of the job, passed to every node
#    and to lg-study through the environment (srun passes it on), never written to disk;
#    a Ray process or client without it is refused.
#    Ports: the head's picked free here, every other one picked free on its node when
#    it starts, so that jobs sharing a node do not collide; no dashboard. The head
#    starts first, then the other nodes join it.
export RAY_AUTH_MODE=token
RAY_AUTH_TOKEN=$(python -c 'import secrets; print(secrets.token_hex(32))')
export RAY_AUTH_TOKEN
free_port() { python -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])'; }
LG_HEAD_IP=$(python -c 'import ray.util; print(ray.util.get_node_ip_address())')
export LG_RAY_ADDRESS="$LG_HEAD_IP:$(free_port)"
# Ray's files on the head node, named by the job: a requeued job keeps its id, so it removes
# what its earlier run left when Slurm killed it before `stop_ray` (short: Ray's socket
# paths must fit in 107 characters)
rm -rf /tmp/lgsray-"$SLURM_JOB_ID"-*
LG_RAY_TEMP=$(mktemp -d "/tmp/lgsray-$SLURM_JOB_ID-XXXXXX")
export LG_HEAD_IP LG_RAY_TEMP LG_CPUS LG_GPUS
export -f free_port
ray_node() {  # `ray_node head` or `ray_node worker`: one Ray node on this node, until it is stopped
    local ports=(--node-manager-port "$(free_port)" --object-manager-port "$(free_port)"
                 --dashboard-agent-listen-port "$(free_port)" --dashboard-agent-grpc-port "$(free_port)"
                 --metrics-export-port "$(free_port)" --runtime-env-agent-port "$(free_port)")
    local common=(--block --disable-usage-stats --num-cpus "$LG_CPUS" --num-gpus "$LG_GPUS" "${ports[@]}")
    if [[ "$1" == head ]]; then
        exec ray start --head --node-ip-address "$LG_HEAD_IP" --port "${LG_RAY_ADDRESS##*:}" \
            --temp-dir "$LG_RAY_TEMP" --include-dashboard false "${common[@]}"
    fi
    exec ray start --address "$LG_RAY_ADDRESS" "${common[@]}"
}
export -f ray_node
ray_log="$(dirname "$LG_SCRIPT")/ray-${SLURM_JOB_ID}.log"
nodes_up() { ray status --address "$LG_RAY_ADDRESS" 2>/dev/null | grep -o 'node_[0-9a-f]\{56\}' | sort -u | wc -l; }
say "starting Ray's head at $LG_RAY_ADDRESS (Ray's messages: $ray_log)"
srun --overlap --nodes=1 --ntasks=1 --nodelist="$SLURMD_NODENAME" bash -c 'ray_node head' >> "$ray_log" 2>&1 &
ray_steps=($!)
for _ in $(seq 60); do (( $(nodes_up) >= 1 )) && break; sleep 2; done
if (( SLURM_JOB_NUM_NODES > 1 )); then
    say "starting Ray on the other $((SLURM_JOB_NUM_NODES - 1)) nodes"
    srun --overlap --nodes=$((SLURM_JOB_NUM_NODES - 1)) --ntasks=$((SLURM_JOB_NUM_NODES - 1)) --ntasks-per-node=1 \
        --exclude="$SLURMD_NODENAME" --kill-on-bad-exit=0 bash -c 'ray_node worker' >> "$ray_log" 2>&1 &
    ray_steps+=($!)
fi

# SIGTERM to the Ray steps, SIGKILL after a minute, then Ray's folder removed. Never `ray
# stop`: it would stop every Ray of this user on the node, another job's too.
stop_ray() {
    say "stopping Ray"
    kill -TERM "${ray_steps[@]}" 2>/dev/null  # srun passes it on: each `ray start --block` ends its node
    for _ in $(seq 60); do kill -0 "${ray_steps[@]}" 2>/dev/null || break; sleep 1; done
    kill -KILL "${ray_steps[@]}" 2>/dev/null
    wait "${ray_steps[@]}" 2>/dev/null
    rm -rf "$LG_RAY_TEMP"
}

# 4. Wait until every node has joined (`ray status`, polled every 2 s for at most 10
#    minutes), then run the study on the head, in the background, so that the traps above
#    run while it does.
for _ in $(seq 300); do
    [[ -n "$stopping" ]] && break
    if ! kill -0 "${ray_steps[0]}" 2>/dev/null; then
        say "error: Ray did not start (see $ray_log)"
        exit 1
    fi
    (( $(nodes_up) >= SLURM_JOB_NUM_NODES )) && break
    sleep 2
done
if [[ -z "$stopping" ]] && (( $(nodes_up) < SLURM_JOB_NUM_NODES )); then
    say "error: only $(nodes_up) of $SLURM_JOB_NUM_NODES nodes joined Ray in 10 minutes (see $ray_log)"
    stop_ray
    exit 1
fi
if [[ -n "$stopping" ]]; then
    stop_ray
    say "stopped before the study started (${stopping}): nothing of it ran in this job;" \
        "a requeued job starts again by itself, otherwise 'sbatch $LG_SCRIPT' runs it"
    exit 130
fi

run=(lg-study run "$LG_STUDY_FILE" --results "$LG_RESULTS" --address "$LG_RAY_ADDRESS")
[[ -n "$LG_PROFILE" ]] && run+=(--profile "$LG_PROFILE")
[[ -n "$LG_TRACKING_URI" ]] && run+=(--tracking-uri "$LG_TRACKING_URI")
say "running: ${run[*]}"
"${run[@]}" &
driver=$!
code=""
while [[ -z "$code" ]]; do  # a trapped signal ends `wait` early: wait again until lg-study is gone
    wait "$driver"
    status=$?
    kill -0 "$driver" 2>/dev/null || code=$status
done

# 5. Stop Ray, and say what became of the study; the job's exit code is lg-study run's.
stop_ray
case "$code" in
    0) say "the study finished: every trial is done (results: $LG_RESULTS)" ;;
    1) say "the study ran, and some trials failed (listed above); 'sbatch $LG_SCRIPT' tries them again" ;;
    130) say "the study stopped (${stopping:-a stop signal}). Kept in $LG_RESULTS: every finished trial," \
             "and each unfinished trial's rows up to its last checkpoint, from which it continues." \
             "A requeued job continues by itself; otherwise 'sbatch $LG_SCRIPT' continues the study" \
             "('lg-study status $LG_STUDY_FILE --results $LG_RESULTS${LG_PROFILE:+ --profile $LG_PROFILE}' lists what is done)" ;;
    *) say "lg-study run ended with exit code $code (see above)" ;;
esac
exit "$code"
