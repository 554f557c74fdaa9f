from embexp.report import main

main()
