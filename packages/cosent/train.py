"""Train with CoSENT.

uv run accelerate launch packages/cosent/train.py --config packages/cosent/configs/<recipe>.yaml
uv run python packages/cosent/train.py \
    --config <recipe>.yaml --learning_rate 1e-5   # flags override
"""

import sys

from sts_cosent.method import main

if __name__ == "__main__":
    sys.exit(main())
