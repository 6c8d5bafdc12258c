"""The command line: click, exit codes, and the commands that call the stages below."""
