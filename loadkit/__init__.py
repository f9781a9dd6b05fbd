"""The load toolkit bench/, loadtest/ and the reliability tests share: the ticket mix,
one open-loop and one closed-loop generator (aiohttp), one percentile, the shipped
graph's arguments. It imports neither bench/ nor loadtest/."""
