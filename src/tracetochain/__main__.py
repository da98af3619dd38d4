from tracetochain.cli import main

main()
