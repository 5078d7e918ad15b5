"""Task schema, JSONL loading and validation, importers, verifiable checks, rubric reward."""
