"""Train with Pcc-tuning: stage 1 (InfoNCE on NLI triplets), stage 2 (1 − Pearson).

uv run accelerate launch packages/pcctuning/train.py \
    --config packages/pcctuning/configs/<recipe>.yaml
uv run python packages/pcctuning/train.py \
    --config <recipe>.yaml --learning_rate 1e-4   # flags override
"""

import sys

from sts_pcctuning.method import main

if __name__ == "__main__":
    sys.exit(main())
