"""Train SIFTER-SimCSE (or the unsupervised SimCSE baseline) on unlabelled sentences.

uv run accelerate launch packages/sifter/train.py --config packages/sifter/configs/<recipe>.yaml
uv run python packages/sifter/train.py \
    --config <recipe>.yaml --learning_rate 3e-5   # flags override
"""

import sys

from sts_sifter.method import main

if __name__ == "__main__":
    sys.exit(main())
