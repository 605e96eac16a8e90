"""Train SIFTER-SimCSE (or the unsupervised SimCSE baseline) on unlabelled sentences.

accelerate launch packages/sifter/train.py --config packages/sifter/configs/<recipe>.yaml
python packages/sifter/train.py --config <recipe>.yaml --learning_rate 3e-5   # flags override
"""

import sys

from sts_sifter.cli import main, make_parser

__all__ = ["main", "make_parser"]

if __name__ == "__main__":
    sys.exit(main())
