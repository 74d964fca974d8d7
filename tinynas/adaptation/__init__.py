"""Bringing a deployed model back after the conditions changed (armband re-worn, other machine load).

`adapt` needs no labels: it re-estimates batch-norm statistics (AdaBN) and the recorded input
normalization from windows of the new session. `recalibrate` fine-tunes the same architecture on a
few labelled windows (one repetition per class) while replaying the original training windows.
Both keep the architecture, so the budget still holds; both re-check it, re-export int8 and record
what changed, and on which data, in the card.
"""
