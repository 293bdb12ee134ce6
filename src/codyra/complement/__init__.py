"""Model complementation: a frozen backbone plus modules kept for every task and chosen at
inference (the paper's first group of baselines, and CoDyRA-dagger's domain prediction).

The pieces here are the methods' defining math, free of the training engine: the domain
router of task-agnostic inference (``routing``), RAIL's analytic regression adapters
(``rail``) and the prompt pools of L2P / DualPrompt (``prompts``).
"""
