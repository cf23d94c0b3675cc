from perfreport.cli import main

main()
