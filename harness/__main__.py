import sys

from harness.cli import finish, main

if __name__ == "__main__":
    finish(main(sys.argv[1:]))
