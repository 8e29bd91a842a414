"""PTransforms and DoFns of the build job, and the plain image functions they call."""
