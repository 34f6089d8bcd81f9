from tidegate.cli import main

main()
