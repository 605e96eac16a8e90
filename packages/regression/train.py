"""Train with the Siamese regression losses (Translated ReLU, Smooth K2).

uv run accelerate launch packages/regression/train.py \
    --config packages/regression/configs/<recipe>.yaml
uv run python packages/regression/train.py \
    --config <recipe>.yaml --learning_rate 1e-5   # flags override
"""

import sys

from sts_regression.method import main

if __name__ == "__main__":
    sys.exit(main())
