import sys

from vpq.cli import main

sys.exit(main())
