from grader.cli import program

program()
