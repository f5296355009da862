"""Training queries made from the knowledge base itself: relational patterns sampled from the schema, gold answers
by executing them on the graph, questions written by the local LLM (or templates)."""
