"""Generated image collections: the demo's sample data, test inputs and benchmark corpora."""
