"""One module per use case, thin over the domain and the seams."""
