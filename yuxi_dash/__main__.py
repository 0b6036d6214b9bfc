"""`python -m yuxi_dash` runs the CLI."""

from yuxi_dash.cli import main

raise SystemExit(main())
