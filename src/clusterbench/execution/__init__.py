"""Run benchmark instances as stored runs: one executor for every command and launcher."""
