import sys

from hvd_container.cli import main

sys.exit(main())
