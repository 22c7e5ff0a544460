set -u
export NCCL_NVLS_ENABLE=0 PYTHONPATH=$PWD PYTHONUNBUFFERED=1
M="mpirun --allow-run-as-root --bind-to none -x NCCL_NVLS_ENABLE=0 -x PYTHONPATH"
python3 -m spmd generate examples/torch/mlp-medium.yaml > /dev/null
for s in ddp ddp-graph; do
  $M -n 1 python3 -m spmd run examples/torch/mlp-medium.yaml -o device=gpu -o verify=none -o params.save=null -o params.strategy=$s -o params.steps=5 -o repeats=3 -o output=/tmp/o-$s > /tmp/log-$s 2>&1; echo "$s rc=$?"
  python3 -c "import json; r=json.load(open('/tmp/o-$s/report.json')); print('$s', r['result']['loss_per_window'])"
done
python3 - <<'PY'
import time, torch
torch.cuda.init(); x = torch.randn(1000, device="cuda")
for name, fn in [("manual_seed", lambda: torch.manual_seed(5)), ("event.record", lambda: torch.cuda.Event(enable_timing=True).record()),
                 ("small kernel", lambda: x.add_(1))]:
    for _ in range(100): fn()
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(2000): fn()
    torch.cuda.synchronize(); print(name, (time.perf_counter() - t) / 2000 * 1e6, "us")
PY
