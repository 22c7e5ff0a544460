"""Facts -> one decision -> its words: the only home of the sentences a sweep or a prediction says."""
