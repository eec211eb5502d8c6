import sys

from hvd_container.cli.app import main

sys.exit(main())
