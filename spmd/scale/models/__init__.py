"""The models of a sweep: figures of its series, the fitted scaling model, the step model, links, overlap."""
