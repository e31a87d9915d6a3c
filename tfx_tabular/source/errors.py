"""The source's errors: what cannot be read names the file (and the column)."""


class InputError(ValueError):
    """Input that cannot be converted; the message names the file (and column)."""


class InputNotFoundError(InputError):
    """The input folder does not exist."""


class ColumnError(InputError):
    """Input that fails on one column, which the message names: the file can be fixed, or the
    column left out."""
