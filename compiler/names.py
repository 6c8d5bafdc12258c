"""Names the shell and the generated scripts keep for themselves, and what a secret's name looks like.

Both the compiler's rules (resolve) and the scripts' own launch-time checks (render) read these, so
they live outside either.
"""

import re

# Names a secret may not take: the shell's own variables (one named IFS would split words, one named PATH
# would find other programs).
SHELL_NAMES = frozenset(
    [
        "BASH",
        "BASHOPTS",
        "BASHPID",
        "BASH_ENV",
        "BASH_SOURCE",
        "BASH_VERSION",
        "CDPATH",
        "COLUMNS",
        "DIRSTACK",
        "ENV",
        "EUID",
        "FUNCNAME",
        "GLOBIGNORE",
        "GROUPS",
        "HISTFILE",
        "HOME",
        "HOSTNAME",
        "HOSTTYPE",
        "IFS",
        "LANG",
        "LANGUAGE",
        "LINENO",
        "LINES",
        "LOGNAME",
        "MAIL",
        "OLDPWD",
        "OPTARG",
        "OPTERR",
        "OPTIND",
        "OSTYPE",
        "PATH",
        "PIPESTATUS",
        "POSIXLY_CORRECT",
        "PPID",
        "PS1",
        "PS2",
        "PS3",
        "PS4",
        "PWD",
        "RANDOM",
        "REPLY",
        "SECONDS",
        "SHELL",
        "SHELLOPTS",
        "SHLVL",
        "SRANDOM",
        "TERM",
        "TMOUT",
        "TMPDIR",
        "UID",
        "USER",
    ]
)
# The generated scripts' own constants and the library's globals all start with SPARKC_, and bash keeps
# BASH_* and the locale keeps LC_* for itself: a name with one of these prefixes is never a secret's.
RESERVED_PREFIXES = ("SPARKC_", "BASH_", "LC_")


def is_reserved(name: str) -> bool:
    """Whether a secret or a launch's --env may not take `name`: the shell's own, or one of the prefixes above."""
    return name in SHELL_NAMES or name.startswith(RESERVED_PREFIXES)


# Whole `_`-separated words only: HF_TOKEN is a secret, TOKENIZERS_PARALLELISM is not.
SECRET_NAME = re.compile(r"(^|_)(TOKEN|SECRET|PASSWORD|PASSWD|API_KEY|ACCESS_KEY|PRIVATE_KEY)(_|$)")
