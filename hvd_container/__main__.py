import sys

from hvd_container.entry import main

sys.exit(main())
