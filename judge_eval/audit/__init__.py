"""Nightly audits: a gate, a history, and reports people read (docs/audit.md).

- :mod:`~judge_eval.audit.config`: the ``audit.toml`` file, checked key by key;
- :mod:`~judge_eval.audit.history`: the SQLite history of audits (one transaction per audit);
- :mod:`~judge_eval.audit.gate`: floors, the baseline, paired tests and Holm's correction;
- :mod:`~judge_eval.audit.canary`: human-labelled pairs re-judged without the cache (judge drift);
- :mod:`~judge_eval.audit.report`: the headline, the terminal table and ``report.md``;
- :mod:`~judge_eval.audit.runner`: :func:`run_audit`, the orchestration.
"""

from judge_eval.audit.config import EXAMPLE, AuditConfig, load_config
from judge_eval.audit.history import History, HistoryError
from judge_eval.audit.runner import AUDIT_FILES, Audit, run_audit

__all__ = ["AUDIT_FILES", "EXAMPLE", "Audit", "AuditConfig", "History", "HistoryError", "load_config", "run_audit"]
