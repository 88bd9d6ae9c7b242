import sys

from delaybridge.cli import main

sys.exit(main())
