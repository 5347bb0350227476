"""The trust boundary: what judges one submission (a pool of sandboxed children, and the checks' side)."""
