import sys

from jitc.cli import main

sys.exit(main())
