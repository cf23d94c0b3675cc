from perfreport.cli.main import main

main()
