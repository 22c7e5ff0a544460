#!/bin/bash
# one turn of bench/tools/halves_design.sh at 8 ranks from TREE (old: ce30a89's workloads, new: this tree): TREE TURN0
pip install -q --no-deps --target /tmp/site .whl/threadpoolctl-*.whl .whl/nvtx-*.whl 2>/dev/null
ROOT=$PWD
if [ "$TREE" = old ]; then cd .whl/old; fi
export PYTHONPATH=/tmp/site:$PWD CUDA_VISIBLE_DEVICES= RANKS=8 TURN0
export SPMD_MPIEXEC="mpirun --allow-run-as-root --bind-to none --oversubscribe -x CUDA_VISIBLE_DEVICES -x PYTHONPATH -x OMP_NUM_THREADS"
python3 -c "import spmd, sys; print(spmd.__file__)"
time bash $ROOT/bench/tools/halves_design.sh $OUT/$TREE 1
cd $OUT && tar czf h.tar.gz $TREE && rm -rf $TREE
