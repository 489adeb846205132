"""bcg: Bundled Contact Gradients for stable first-order policy learning through stiff contact."""

__version__ = "0.1.0"

_BAD_JAX = {
    "0.10.2": "it miscompiles a vmapped mat-vec followed by a reduction on CPU (jax issue "
    "39103), which silently corrupts simulated states and gradients"
}


def _check_jax_version(version: str | None = None) -> None:
    """Raise if the installed JAX is a release known to compute wrong results."""
    if version is None:
        from importlib.metadata import PackageNotFoundError
        from importlib.metadata import version as _v

        for pkg in ("jax", "jaxlib"):
            try:
                _check_jax_version(_v(pkg))
            except PackageNotFoundError:
                pass
        return
    if version in _BAD_JAX:
        raise RuntimeError(
            f"bcg refuses JAX/jaxlib {version}: {_BAD_JAX[version]}. "
            "Install another release, e.g. pip install 'jax!=0.10.2' 'jaxlib!=0.10.2'."
        )


_check_jax_version()
