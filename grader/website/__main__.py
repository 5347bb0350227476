import sys

from grader.website.build import main

sys.exit(main())
