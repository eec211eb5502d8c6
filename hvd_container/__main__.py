import sys

from hvd_container.cli.entry import main

sys.exit(main())
