"""Code shared by the Functions app, the dev host and the Spark jobs."""
