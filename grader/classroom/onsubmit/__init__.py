"""Grading on submit: the hub's grading service (`service`: its queue and workers), its pages as HTML
(`pages`), their web server under the hub (`web`) and the one-service-per-class lock (`servicelock`).

May import: every other room of the class (grading, lti, grades, policy, intake) and the bottom
(ledger, phrasebook, submissions). Used by: `grader serve` (grader.cli.serve) only; nothing of the class
imports it.
"""
