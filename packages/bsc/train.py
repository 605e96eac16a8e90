"""Train with the batch-softmax contrastive loss (BSC) and its batch shuffling.

uv run accelerate launch packages/bsc/train.py --config packages/bsc/configs/<recipe>.yaml
uv run python packages/bsc/train.py --config <recipe>.yaml --learning_rate 1e-5   # flags override
"""

import sys

from sts_bsc.method import main

if __name__ == "__main__":
    sys.exit(main())
