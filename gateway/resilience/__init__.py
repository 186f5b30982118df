"""What the gateway does when an upstream fails: which target an attempt goes to (balance), whether
a failed attempt is tried again and after how long (retry), and which targets are skipped after
repeated failures (circuit). The exchange's attempt loop composes them; none of them sends."""
